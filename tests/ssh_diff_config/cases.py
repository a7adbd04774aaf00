"""The corpus: ssh_config trees and host arguments, taken from the scenarios of OpenSSH's
regress/cfginclude.sh, cfgmatch.sh, cfgparse.sh, percent.sh and ssh_config(5) (their
scenarios, not their code), plus the differences issue 23 found.

`files` maps paths relative to the private home to their text (`{home}` is that home;
"@dir" makes a directory, "@symlink:TARGET" a link); the main file is `.ssh/config` read
with `ssh -F` unless `default_config` (then as ssh reads ~/.ssh/config itself). `refusal` set:
a documented refusal (ssh accepts, fleetcheck refuses with that text; docs/ssh.md says why)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Case:
    family: str
    name: str
    files: dict[str, str]
    argvs: tuple[tuple[str, ...], ...] = (("h",),)
    env: dict[str, str] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    owners: dict[str, int] = field(default_factory=dict)
    main: str = ".ssh/config"
    default_config: bool = False
    expand_ids: bool = False
    refusal: str | None = None
    why: str = ""

    @property
    def id(self) -> str:
        return f"{self.family}: {self.name}"


def c(family: str, name: str, config: str, *argvs: str, **kw: object) -> Case:
    """A case with one main file; each argv is a space-separated ssh command line tail."""
    files = {".ssh/config": config, **kw.pop("files", {})}  # type: ignore[dict-item]
    args = tuple(tuple(a.split()) for a in argvs) or (("h",),)
    return Case(family, name, files, args, **kw)  # type: ignore[arg-type]


NOBODY = 65534
EXPANDED_LATE = (
    "ssh -G prints IdentityFile unexpanded and fails only when it loads the key; fleetcheck "
    "expands while resolving, so it refuses the host at once"
)
CANON_DNS = (
    "canonicalising with CanonicalDomains, CanonicalizePermittedCNAMEs or a name ending in a "
    "dot needs DNS lookups while the config is read; fleetcheck refuses rather than guess "
    "which name ssh would pick"
)
GROUP_WRITABLE = (
    "Debian's ssh (the oracle here) accepts a file its owner's private group may write; "
    "upstream OpenSSH and fleetcheck refuse any file writable by group or others"
)
STRICTER = (
    "the keyword can make ssh refuse a connection or a host key and fleetcheck does not carry "
    "it out, so it refuses the host (one line naming keyword, file and line) rather than "
    "connect where ssh may refuse"
)
# fmt: off
CASES: list[Case] = [
    # ------------------------------------------------------------------ Host patterns
    c("host", "first value wins", "Host web\n User a\n Port 2201\nHost *\n User b\n Port 2202\n",
      "web", "other", "-l cli web", "-p 2300 web"),
    c("host", "hostname token and lower case",
      "Host web*\n HostName %h.Example.COM\nHost db\n HostName 10.0.0.5\n", "web1", "WEB1", "db"),
    c("host", "negation excludes", "Host * !bastion\n ProxyJump bastion\n", "app1", "bastion"),
    c("host", "negation alone never matches", "Host !web\n User neg\nHost web\n User pos\n",
      "web", "other"),
    c("host", "negation after a match", "Host web* !web2\n User w\n", "web1", "web2"),
    c("host", "wildcards ? and *", "Host db?\n User one\nHost db*\n User many\n",
      "db1", "db12", "db"),
    c("host", "patterns are case-sensitive", "Host Web\n User cap\nHost web\n User low\n",
      "Web", "web", "WEB"),
    c("host", "brackets are literal", "Host [ab]\n User br\nHost a\n User a\n", "a", "b"),
    c("host", "several patterns on one line", "Host a b c\n User abc\n", "b", "d"),
    c("host", "options before any Host apply to all", "User top\nHost a\n User a\n", "a"),
    c("host", "identity files accumulate and dedupe",
      "Host a\n IdentityFile ~/.ssh/k1\nHost *\n IdentityFile ~/.ssh/k1\n IdentityFile ~/.ssh/k2\n",
      "a", "b"),
    c("host", "IdentityFile none", "Host a\n IdentityFile none\n", "a"),
    # ------------------------------------------------------------------ Include
    c("include", "absolute glob", "Include {home}/conf.d/*.conf\nHost *\n User fallback\n",
      "web", "db", "x", files={"conf.d/10-web.conf": "Host web\n HostName 10.0.1.1\n User d\n",
                                "conf.d/20-db.conf": "Host db\n Port 5022\n",
                                "conf.d/ignored.txt": "Host web\n User wrong\n"}),
    c("include", "relative to ~/.ssh", "Include inc/*\n", "rel", "nope",
      files={".ssh/inc/a": "Host rel\n HostName 10.0.2.1\n IdentityFile ~/.ssh/rel_key\n"}),
    c("include", "tilde path", "Include ~/.ssh/other\n", "t",
      files={".ssh/other": "Host t\n User tilde\n"}),
    c("include", "nested", "Include {home}/one\n", "n1", "n2",
      files={"one": "Include {home}/two\nHost n1\n User one\n",
             "two": "Host n1 n2\n User two\n HostName 10.0.3.%h\n"}),
    c("include", "inside Host", "Host web\n Include {home}/inc\nHost other\n Include {home}/inc2\n",
      "web", "db", files={"inc": "User from-inc\nHost *\n Port 2022\n", "inc2": "User wrong\n"}),
    c("include", "inside Match", "Match host m*\n Include {home}/inc\n", "m1", "x",
      files={"inc": "User in-match\n"}),
    c("include", "Match in include does not leak",
      "Host a\n Include {home}/inc\n User after-include\nHost *\n Port 2\n", "a", "b",
      files={"inc": "Match host zzz\n HostName never\n"}),
    c("include", "several arguments and missing files",
      "Include {home}/missing {home}/a {home}/b*\nHost *\n User z\n", "x", "y", "w",
      files={"a": "Host x\n User from-a\n", "b1": "Host y\n User from-b1\n"}),
    c("include", "glob order is sorted", "Include {home}/d/*\n", "h",
      files={"d/b": "User b\n", "d/a": "User a\n", "d/c": "User c\n"}),
    c("include", "missing file is nothing", "Include {home}/nope\nUser u\n", "h"),
    c("include", "directory reads nothing", "Include {home}/adir\nUser u\n", "h",
      files={"adir": "@dir"}),
    c("include", "recursion limit", "Include {home}/.ssh/config\n", "h"),
    c("include", "bad line in an inactive include",
      "Host other\n Include {home}/inc\n", "h", files={"inc": "Junk yes\n"}),
    c("include", "first value wins across files", "Include {home}/a\nUser main\n", "h",
      files={"a": "User inc\n"}),
    c("include", "dangling symlink", "Include {home}/link\n", "h",
      files={"link": "@symlink:{home}/gone"}),
    # ------------------------------------------------------------------ permissions (security)
    c("permissions", "included file writable by group", "Include {home}/inc\n", "h",
      files={"inc": "ProxyCommand touch {home}/pwned\n"}, modes={"inc": 0o620},
      refusal="Bad owner or permissions",
      why=GROUP_WRITABLE),
    c("permissions", "included file writable by others", "Include {home}/inc\n", "h",
      files={"inc": "User evil\n"}, modes={"inc": 0o602}),
    c("permissions", "included file owned by another user", "Include {home}/inc\n", "h",
      files={"inc": "User evil\n"}, owners={"inc": NOBODY}),
    c("permissions", "writable include in an inactive block", "Host zzz\n Include {home}/inc\n",
      "h", files={"inc": "User evil\n"}, modes={"inc": 0o666}),
    c("permissions", "writable file matched by a glob", "Include {home}/d/*\n", "h",
      files={"d/ok": "User ok\n", "d/bad": "User bad\n"}, modes={"d/bad": 0o664},
      refusal="Bad owner or permissions",
      why=GROUP_WRITABLE),
    c("permissions", "read-only for others is fine", "Include {home}/inc\n", "h",
      files={"inc": "User fine\n"}, modes={"inc": 0o644}),
    c("permissions", "main ~/.ssh/config writable by group", "User evil\n", "h",
      modes={".ssh/config": 0o660}, default_config=True,
      refusal="Bad owner or permissions",
      why=GROUP_WRITABLE),
    c("permissions", "main ~/.ssh/config owned by another user", "User evil\n", "h",
      owners={".ssh/config": NOBODY}, default_config=True),
    c("permissions", "main -F file writable by group", "User evil\n", "h",
      modes={".ssh/config": 0o664}, refusal="Bad owner or permissions",
      why="ssh -F does not check the file named with -F; fleetcheck checks its config_file as "
      "ssh checks ~/.ssh/config (the default), so a file others can write is never obeyed"),
    # ------------------------------------------------------------------ Match
    c("match", "host uses the HostName",
      "Host short\n HostName long.example.org\nMatch host *.example.org\n User by-hostname\n"
      "Match originalhost short\n Port 2200\n", "short", "long.example.org", "x.example.org"),
    c("match", "host after a HostName with %h",
      "Host *.lan\n HostName %h.example.net\nMatch host *.lan.example.net\n User lan\n",
      "box.lan", "box"),
    c("match", "host pattern is lower-cased, the name is not",
      "Match host WEB\n User m\n", "web", "WEB"),
    c("match", "originalhost", "Match originalhost a*\n User orig\n", "abc", "xyz", "ABC"),
    c("match", "user and localuser",
      "Match user ops\n Port 2201\nMatch localuser {localuser}\n IdentityFile ~/.ssh/local_%u\n"
      "Match !localuser {localuser}\n IdentityFile ~/.ssh/never\nHost *\n User default\n",
      "h", "-l ops h", "ops@h"),
    c("match", "user is case-sensitive", "Match user OPS\n Port 2\n", "-l ops h", "-l OPS h"),
    c("match", "exec double quotes", 'Match exec "test %h = yes"\n User exec-yes\n', "yes", "no"),
    c("match", "exec single quotes", "Match exec 'test %h = yes'\n User exec-yes\n", "yes"),
    c("match", "exec unquoted", "Match exec true\n User t\n", "h"),
    c("match", "exec skipped after a failed criterion",
      "Match host x exec false\n User never\nMatch !exec false\n Port 2222\n", "x", "y"),
    c("match", "exec %k without HostKeyAlias", 'Match exec "test %k = h"\n User k\n', "h", "g"),
    c("match", "exec %k with HostKeyAlias",
      'Host h\n HostKeyAlias Alias1\nMatch exec "test %k = Alias1"\n User k\n', "h"),
    c("match", "exec tokens", 'Match exec "test %n%p%r = h22root -o %u = {localuser}"\n User t\n',
      "h"),
    c("match", "exec %d and %i", 'Match exec "test -d %d -a %i -ge 0"\n User t\n', "h"),
    c("match", "exec unknown token", 'Match exec "echo %z"\n User t\n', "h"),
    c("match", "all", "Host a\n User a\nMatch all\n User all\n Port 2000\n", "a", "b"),
    c("match", "all after one criterion", "Match host a all\n User m\n", "a", "b"),
    c("match", "all with two criteria", "Match host a user b all\n User m\n", "a"),
    c("match", "all followed by more", "Match all host a\n User m\n", "a"),
    c("match", "negated all", "Match !all\n User m\n", "a"),
    c("match", "negated host list", 'Match host "*.corp,!gw.corp"\n ProxyJump gw.corp\n',
      "a.corp", "gw.corp", "a.home"),
    c("match", "negated criterion", "Match !host a*\n User not-a\n", "abc", "xyz"),
    c("match", "comma list", "Match user alice,bob\n Port 2\n", "-l bob h", "-l carol h"),
    c("match", "host=value syntax", "Match host=a\n User eq\n", "a", "b"),
    c("match", "criteria keyword case", "Match HOST a\n User up\n", "a"),
    c("match", "without criteria", "Match\n User m\n", "h"),
    c("match", "missing argument", "Match host\n User m\n", "h"),
    c("match", "unknown criterion", "Match nosuch x\n User m\n", "h"),
    c("match", "localnetwork is not in 9.2", "Match localnetwork 10.0.0.0/8\n User m\n", "h"),
    c("match", "comment after criteria", "Match host a # comment\n User m\n", "a"),
    c("match", "final matches on the second pass", "Match final\n User fin\n", "h"),
    c("match", "canonical matches on the second pass",
      "Match canonical\n User can\nMatch !canonical\n Port 2\n", "h"),
    c("match", "final pass sees the HostName",
      "Host a\n HostName real.example\nMatch final host real.example\n User seen\n"
      "Host real.example\n Port 2201\n", "a"),
    c("match", "final pass Host matches the HostName",
      "Host a\n HostName b\nMatch final\nHost b\n User via-final\n", "a"),
    c("match", "final with first value already set",
      "User first\nMatch final\n User second\n", "h"),
    c("match", "identity files not doubled by the final pass",
      "IdentityFile ~/.ssh/one\nMatch final\n IdentityFile ~/.ssh/two\n", "h"),
    c("match", "exec sees an earlier Port", 'Port 2022\nMatch exec "test %p = 2022"\n User p\n',
      "h"),
    # ------------------------------------------------------------------ tokens
    c("tokens", "IdentityFile tokens",
      "Host web\n HostName web.example\n User deploy\n IdentityFile ~/.ssh/%h_%r_%p\n"
      " IdentityFile %d/.ssh/%n_%u\nHost *\n IdentityFile ~/.ssh/c_%C\n IdentitiesOnly yes\n",
      "web", "other", expand_ids=True),
    c("tokens", "IdentityFile %k without HostKeyAlias", "IdentityFile ~/.ssh/%k\n",
      "h", "Mixed", expand_ids=True),
    c("tokens", "IdentityFile %k with HostKeyAlias",
      "HostKeyAlias MyAlias\nIdentityFile ~/.ssh/%k\n", "h", expand_ids=True),
    c("tokens", "IdentityFile %i %L %l %%", "IdentityFile ~/.ssh/%i_%L_%l_%%\n", "h",
      expand_ids=True),
    c("tokens", "UserKnownHostsFile tokens",
      "Host a\n UserKnownHostsFile ~/kh_%h %d/.ssh/kh_%r %k\n", "a", "b"),
    c("tokens", "UserKnownHostsFile %k with HostKeyAlias",
      "HostKeyAlias FOO\nUserKnownHostsFile ~/.ssh/kh_%k\n", "h"),
    c("tokens", "HostName %% and %h", "HostName %h.%%\n", "h"),
    c("tokens", "HostName unknown token", "HostName %p.x\n", "h"),
    c("tokens", "trailing percent", "HostName h%\n", "h"),
    c("tokens", "unknown token in IdentityFile", "IdentityFile ~/.ssh/%z\n", "h",
      refusal="unknown token %z", why=EXPANDED_LATE),
    c("tokens", "IdentityFile of an unknown ~user", "IdentityFile ~nosuchuser/k\n", "h",
      refusal="no such user", why=EXPANDED_LATE),
    c("tokens", "UserKnownHostsFile of an unknown ~user", "UserKnownHostsFile ~nosuchuser/k\n",
      "h"),
    c("tokens", "IdentityFile of ~root", "IdentityFile ~root/k\n", "h"),
    c("tokens", "IdentityFile %d %u %% and a space",
      'IdentityFile %d/%u/%%\nIdentityFile "~/.ssh/a b"\n', "h", expand_ids=True),
    c("tokens", "IdentityFile %r@%h:%p from the command line", "IdentityFile ~/.ssh/%r@%h:%p\n",
      "-l bob -p 2 h", expand_ids=True),
    c("match", "user from -l beats the file's User", "User cfg\nMatch user cfg\n Port 2\n",
      "h", "-l cli h"),
    c("match", "exec %C %L %l", 'Match exec "test %C = x"\n User a\n'
      'Match exec "test -n %L%l"\n Port 3\n', "h"),
    c("match", "exec with a token as the command", "Match exec %h\n User x\n", "true", "false"),
    c("match", "canonical host after CanonicalizeHostname",
      "CanonicalizeHostname yes\nMatch canonical host h\n User ch\n", "h", "H"),
    c("host", "negation with a later wildcard", "Host *.a\n User a\nHost !x.a *.a\n User b\n",
      "y.a", "x.a"),
    c("include", "relative arguments", "Include a b\n", "h",
      files={".ssh/a": "User a\n", ".ssh/b": "User b\n"}),
    c("include", "tilde glob", "Include ~/.ssh/*.conf\n", "h", files={".ssh/x.conf": "User x\n"}),
    c("tokens", "unknown token in UserKnownHostsFile", "UserKnownHostsFile ~/%z\n", "h"),
    c("tokens", "GlobalKnownHostsFile printed as written",
      "GlobalKnownHostsFile ~/g1 /etc/g2\n", "h"),
    c("tokens", "tilde forms", "UserKnownHostsFile ~ ~/ ~//x\n", "h"),
    # ------------------------------------------------------------------ ${VAR}
    c("env", "IdentityFile ${VAR}", "IdentityFile ${KEYDIR}/id_${KEYNAME}\n", "h",
      env={"KEYDIR": "/srv/keys", "KEYNAME": "fleet"}, expand_ids=True),
    c("env", "IdentityFile undefined ${VAR}", "IdentityFile ${NO_SUCH_VAR}/k\n", "h",
      expand_ids=True),
    c("env", "UserKnownHostsFile ${VAR}", "UserKnownHostsFile ${KH}/known_hosts\n", "h",
      env={"KH": "/srv/kh"}),
    c("env", "UserKnownHostsFile undefined ${VAR}", "UserKnownHostsFile ${NO_SUCH_VAR}/kh\n",
      "h"),
    c("env", "UserKnownHostsFile unclosed ${", "UserKnownHostsFile ${KH/kh\n", "h",
      env={"KH": "/x"}),
    c("env", "${VAR} in an inactive block", "Host zzz\n UserKnownHostsFile ${NO_SUCH_VAR}\n",
      "h"),
    c("env", "$VAR without braces is literal", "UserKnownHostsFile /k/$KH\n", "h",
      env={"KH": "x"}),
    c("env", "IdentityAgent undefined ${VAR}", "IdentityAgent ${NO_SUCH_VAR}\n", "h"),
    c("env", "${HOME} in UserKnownHostsFile", "UserKnownHostsFile ${HOME}/kh\n", "h"),
    # ------------------------------------------------------------------ ProxyJump / Command
    c("proxy", "ProxyJump chain",
      "Host target\n ProxyJump j1,alice@j2:2222\nHost j1\n HostName 10.0.4.1\n ProxyJump j0\n",
      "target", "j1"),
    c("proxy", "ProxyJump vs ProxyCommand",
      "Host a\n ProxyJump none\n ProxyCommand nc %h %p\nHost b\n ProxyCommand none\n"
      " ProxyJump x\nHost c\n ProxyJump j\n ProxyCommand nc %h %p\n"
      "Host d\n ProxyCommand ssh -W %h:%p gw\n ProxyJump j\n", "a", "b", "c", "d"),
    c("proxy", "ProxyJump ssh:// URI", "Host h\n ProxyJump ssh://u@j1:2200\n", "h"),
    c("proxy", "ProxyJump comment", "Host h\n ProxyJump j1:22 # via j1\n", "h"),
    c("proxy", "ProxyJump numeric hop", "Host h\n ProxyJump u@10.0.0.1:2200\n", "h"),
    c("proxy", "ProxyJump IPv6 hop", "Host h\n ProxyJump x,u@[fd00::1]:4\n", "h"),
    c("proxy", "ProxyJump invalid port", "ProxyJump j:notaport\n", "h"),
    c("proxy", "ProxyJump invalid in an inactive block", "Host zzz\n ProxyJump j:notaport\n",
      "h"),
    c("proxy", "ProxyJump none", "Host a\n ProxyJump none\nHost !j *\n ProxyJump j\n", "a", "b"),
    c("proxy", "ProxyCommand kept as written",
      'ProxyCommand sh -c "nc %h %p"  # c\n', "h"),
    c("proxy", "ProxyCommand none", "ProxyCommand none\n", "h"),
    c("proxy", "ProxyCommand tokens", "ProxyCommand nc %h %p %r %n %k %%\n", "h"),
    c("proxy", "ProxyCommand unknown token", "ProxyCommand nc %d\n", "h",
      refusal="unknown token %d",
      why="ssh -G prints ProxyCommand unexpanded and fails only when it connects (it knows "
      "%h %k %n %p %r there); fleetcheck refuses the host while resolving"),
    c("proxy", "ProxyCommand with = syntax", "ProxyCommand=nc %h %p\n", "h"),
    # ------------------------------------------------------------------ HostKeyAlias
    c("hostkeyalias", "lower-cased", "Host a\n HostKeyAlias Web-Prod\n", "a", "b"),
    c("hostkeyalias", "first wins", "HostKeyAlias one\nHostKeyAlias two\n", "h"),
    c("hostkeyalias", "extra argument", "HostKeyAlias one two\n", "h"),
    # ------------------------------------------------------------------ CanonicalizeHostname
    c("canonical", "no is ignored", "CanonicalizeHostname no\nUser u\n", "h"),
    c("canonical", "yes without domains re-parses",
      "CanonicalizeHostname yes\nHost a\n HostName Other\nHost other\n User re-parsed\n", "a"),
    c("canonical", "always without domains", "CanonicalizeHostname always\nMatch canonical\n"
      " User c\n", "h"),
    c("canonical", "bad value", "CanonicalizeHostname maybe\n", "h"),
    c("canonical", "with CanonicalDomains",
      "CanonicalizeHostname yes\nCanonicalDomains example.invalid\n", "h",
      refusal="CanonicalDomains", why=CANON_DNS),
    c("canonical", "name with a trailing dot", "CanonicalizeHostname yes\nHostName box.\n", "h",
      refusal="CanonicalizeHostname", why=CANON_DNS),
    c("canonical", "no fallback to the local name",
      "CanonicalizeHostname yes\nCanonicalizeFallbackLocal no\n", "h"),
    c("canonical", "enough dots: domains not tried",
      "CanonicalizeHostname yes\nCanonicalDomains example.invalid\nHostName a.b.c\n", "h"),
    c("canonical", "CanonicalDomains none first",
      "CanonicalizeHostname yes\nCanonicalDomains none\nUser u\n", "h"),
    c("canonical", "yes leaves a jump host's target alone",
      "Host h\n CanonicalizeHostname yes\n CanonicalDomains example.invalid\n ProxyJump j\n",
      "h"),
    c("canonical", "address put in numeric form", "User u\n", "10.1", "FE80:0::1"),
    # ------------------------------------------------------------------ Port
    c("port", "service name", "Port ssh\n", "h"),
    c("port", "other service name", "Host a\n Port http\n", "a"),
    c("port", "unknown service", "Port no-such-service\n", "h"),
    c("port", "zero", "Port 0\n", "h"),
    c("port", "too large", "Port 70000\n", "h"),
    c("port", "bad port in an inactive block", "Host zzz\n Port x\n", "h"),
    c("port", "leading zero", "Port 022\n", "h"),
    # ------------------------------------------------------------------ keyword/value checks
    c("validation", "unknown keyword", "Junk x\n", "h"),
    c("validation", "unknown keyword in an inactive block", "Host zzz\n Junk x\n", "h"),
    c("validation", "IgnoreUnknown", "IgnoreUnknown Junk,Other*\nJunk x\nOtherThing y\n", "h"),
    c("validation", "IgnoreUnknown after the keyword", "Junk x\nIgnoreUnknown Junk\n", "h"),
    c("validation", "User with two words", "User alice bob\n", "h"),
    c("validation", "User with two words, inactive", "Host zzz\n User alice bob\n", "h"),
    c("validation", "ConnectTimeout 1.5", "ConnectTimeout 1.5\n", "h"),
    c("validation", "ConnectTimeout with units", "ConnectTimeout 1m30s\n", "h"),
    c("validation", "ConnectTimeout none", "ConnectTimeout none\n", "h"),
    c("validation", "ServerAliveInterval and CountMax",
      "ServerAliveInterval 15\nServerAliveCountMax 4\n", "h"),
    c("validation", "ServerAliveCountMax not a number", "ServerAliveCountMax x\n", "h"),
    c("validation", "UserKnownHostsFile /x none", "UserKnownHostsFile /x none\n", "h"),
    c("validation", "UserKnownHostsFile none", "UserKnownHostsFile none\n", "h"),
    c("validation", "GlobalKnownHostsFile none", "GlobalKnownHostsFile none\n", "h"),
    c("validation", "yes/no value", "IdentitiesOnly maybe\n", "h"),
    c("validation", "yes/no as true", "IdentitiesOnly true\n", "h"),
    c("validation", "StrictHostKeyChecking values",
      "Host a\n StrictHostKeyChecking accept-new\nHost b\n StrictHostKeyChecking off\n"
      "Host c\n StrictHostKeyChecking ask\nHost d\n StrictHostKeyChecking TRUE\n",
      "a", "b", "c", "d"),
    c("validation", "StrictHostKeyChecking bad value", "StrictHostKeyChecking sometimes\n", "h"),
    c("validation", "flag of a keyword we ignore", "Compression perhaps\n", "h"),
    c("validation", "keyword we ignore with extra arguments", "ControlPath /a /b\n", "h"),
    c("validation", "deprecated keyword", "Protocol 2\nUseRoaming no\n", "h"),
    c("validation", "keyword without argument", "User\n", "h"),
    c("validation", "Host without pattern", "Host\n", "h"),
    c("validation", "LocalForward is not ours", "LocalForward 8080 localhost:80\n", "h"),
    # ------------------------------------------------------------------ lexical rules
    c("syntax", "equals, quotes, comments, keyword case",
      "# comment\nHOST=web\n  hostname = 10.0.5.1 # trailing\n"
      '  USER "quoted user"\n  port=2023\n  IdentityFile "~/.ssh/with space"\n', "web"),
    c("syntax", "unterminated quote", 'User "open\n', "h"),
    c("syntax", "single quotes", "User 'a b'\n", "h"),
    c("syntax", "backslash escapes", "IdentityFile ~/.ssh/a\\ b\n", "h"),
    c("syntax", "no line continuation", "User a \\\n Port 2\n", "h"),
    c("syntax", "tabs and indentation", "\tHost\th\n\t\tUser\ttab\n", "h"),
    c("syntax", "CR LF line endings", "Host h\r\n User crlf\r\n", "h"),
    c("syntax", "keyword=value with spaces", "User = spaced\n", "h"),
    c("syntax", "comment lines and blank lines", "\n# Host h\n   # x\n\nUser u\n", "h"),
    c("syntax", "hash inside a word", "User a#b\n", "h"),
    c("syntax", "command line beats the file",
      "Host a\n User file\n Port 2000\n", "-l cli -p 3000 a", "ssh://u@a:4000"),
    # ------------------------------------------------------------------ more rules, each family
    c("syntax", "keyword=value=more", "Host=a\nUser=x=y\n", "a"),
    c("syntax", "quote in the middle of a word", 'User  "a"b\n', "h"),
    c("syntax", "hash at the end of a pattern", "Host a\n User x #c\nHost b#\n User y\n", "b#"),
    c("syntax", "empty quoted HostName", 'Hostname ""\n', "h"),
    c("syntax", "empty quoted User", 'User ""\n', "h"),
    c("match", "exec then user", 'Match exec "true"  user root\n User m\n', "h"),
    c("match", "quoted host with a space", 'Match host "a b"\n User m\n', "a"),
    c("match", "exec and negated exec", 'Match exec "exit 0" !exec "exit 1"\n User m\n', "h"),
    c("match", "Match inside a Host block", "Host a\n Match host a\n User m\n", "a"),
    c("match", "negated final", "Match !final\n User nf\nMatch final\n Port 2\n", "h"),
    c("match", "final then all", "Match final all\n User m\n", "h"),
    c("match", "keyword and criterion case", "Match Host a\n  User m\nmatch HOST=b\n User n\n",
      "a", "b"),
    c("match", "originalhost then host after HostName",
      "Match originalhost h\n HostName x\nMatch host x\n User y\n", "h"),
    c("validation", "ConnectTimeout 0", "Host *\n ConnectTimeout 0\n", "h"),
    c("validation", "ConnectTimeout negative", "ConnectTimeout -1\n", "h"),
    c("validation", "ConnectTimeout unit in capitals", "ConnectTimeout 5S\n", "h"),
    c("validation", "ServerAliveInterval with units", "ServerAliveInterval 1m\n", "h"),
    c("validation", "CanonicalizeMaxDots not an integer", "CanonicalizeMaxDots 1.5\n", "h"),
    c("validation", "empty UserKnownHostsFile", 'UserKnownHostsFile ""\n', "h"),
    c("validation", "GlobalKnownHostsFile NONE with another", "GlobalKnownHostsFile /a NONE\n",
      "h"),
    c("validation", "IgnoreUnknown everything", "IgnoreUnknown *\nWhatever 1\n", "h"),
    c("validation", "IgnoreUnknown in an inactive block",
      "Host zzz\n IgnoreUnknown Junk\nJunk 1\n", "h"),
    c("validation", "SetEnv without =", "SetEnv A=b none\n", "h"),
    c("validation", "LogLevel unknown", "LogLevel loud\n", "h"),
    c("validation", "AddressFamily unknown", "AddressFamily inet4\n", "h"),
    c("validation", "ForwardAgent a path", "ForwardAgent /tmp/x\n", "h"),
    c("validation", "ForwardAgent undefined ${VAR}", "ForwardAgent ${NO_SUCH_VAR}\n", "h"),
    c("validation", "Ciphers unknown", "Ciphers nosuchcipher\n", "h"),
    c("validation", "Ciphers removal is not checked", "Ciphers -nosuchcipher\n", "h"),
    c("validation", "Ciphers appended", "Ciphers +aes128-cbc,\n", "h"),
    c("validation", "MACs unknown", "MACs hmac-nope\n", "h"),
    c("validation", "KexAlgorithms known", "KexAlgorithms curve25519-sha256,ecdh-sha2-nistp256\n",
      "h"),
    c("validation", "HostKeyAlgorithms unknown", "HostKeyAlgorithms nosuch\n", "h"),
    c("validation", "HostKeyAlgorithms pattern", "HostKeyAlgorithms ^ssh-ed25519*,rsa-sha2-*\n",
      "h", refusal="HostKeyAlgorithms ^ssh-ed25519", why=STRICTER),
    # ------------------------------------------------------------------ keywords that can refuse
    c("stricter", "RevokedHostKeys", "Host h\n RevokedHostKeys ~/.ssh/revoked\n", "h",
      refusal="config line 2: RevokedHostKeys", why=STRICTER),
    c("stricter", "RevokedHostKeys none", "RevokedHostKeys none\n", "h"),
    c("stricter", "first value wins: none first",
      "Host h\n RevokedHostKeys none\nHost *\n RevokedHostKeys /x\n", "h"),
    c("stricter", "KnownHostsCommand", "KnownHostsCommand /bin/cat %H\n", "h",
      refusal="KnownHostsCommand", why=STRICTER),
    c("stricter", "HostKeyAlgorithms appended", "HostKeyAlgorithms +ssh-rsa\n", "h",
      refusal="HostKeyAlgorithms +ssh-rsa", why=STRICTER),
    c("stricter", "CASignatureAlgorithms", "CASignatureAlgorithms ssh-ed25519\n", "h",
      refusal="CASignatureAlgorithms", why=STRICTER),
    c("stricter", "CASignatureAlgorithms appended", "CASignatureAlgorithms +ssh-rsa\n", "h"),
    c("stricter", "Ciphers reordered", "Ciphers ^aes256-ctr\n", "h"),
    c("stricter", "MACs restricted: not applied, not refused", "MACs hmac-sha2-512\n", "h"),
    c("stricter", "CheckHostIP yes", "CheckHostIP yes\n", "h",
      refusal="CheckHostIP", why=STRICTER),
    c("stricter", "CheckHostIP no", "CheckHostIP no\n", "h"),
    c("stricter", "VerifyHostKeyDNS ask", "VerifyHostKeyDNS ask\n", "h",
      refusal="VerifyHostKeyDNS", why=STRICTER),
    c("stricter", "VerifyHostKeyDNS no", "VerifyHostKeyDNS no\n", "h"),
    c("stricter", "RequiredRSASize above the default", "RequiredRSASize 3072\n", "h",
      refusal="RequiredRSASize", why=STRICTER),
    c("stricter", "RequiredRSASize the default", "RequiredRSASize 1024\n", "h"),
    c("stricter", "in an inactive block", "Host zzz\n CheckHostIP yes\n HostKeyAlgorithms x\n",
      "h"),
    c("validation", "PubkeyAcceptedAlgorithms pattern matching none",
      "PubkeyAcceptedAlgorithms +nosuch*\n", "h"),
    c("port", "signed port", "Port +22\n", "h"),
    c("port", "port with trailing letters", "Port 22x\n", "h"),
    c("canonical", "numeric HostName", "HostName 1\n", "h"),
    c("canonical", "HostName lower-cased", "HostName FOO.bar\n", "h"),
    c("canonical", "HostName address with leading zeros", "Host a\n HostName 127.0.0.01\n", "a"),
    c("canonical", "yes with a HostName in capitals",
      "CanonicalizeHostname yes\nHost h\n HostName Big.Example\nHost big.example\n User c\n",
      "h"),
    c("proxy", "ProxyJump empty first hop", "ProxyJump ,j\n", "h"),
    c("proxy", "ProxyJump empty last hop", "ProxyJump j,\n", "h"),
    c("proxy", "ProxyJump empty user", "ProxyJump @j\n", "h"),
    c("proxy", "ProxyJump NONE in capitals", "Host h\n ProxyJump NONE\n", "h"),
    c("include", "Include of the home directory", "Include ~\n", "h"),
    c("include", "Include after a tab", "Include\t{home}/x\nUser u\n", "h",
      files={"x": "User from-x\n"}),
]
# fmt: on
