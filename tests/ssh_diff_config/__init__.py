"""Differential harness: fleetcheck's ssh_config resolution against the real `ssh -G`.

Each case in cases.py is an ssh_config tree, host arguments and environment variables; the
real OpenSSH client resolves it inside a private mount and network namespace (a private HOME
bound over the user's home, no network at all) and fleetcheck resolves the same files with
the same HOME. They must agree on every keyword fleetcheck uses, and where ssh refuses the
config fleetcheck must refuse it too with a one-line reason naming the file. A case marked
as a documented refusal is one where fleetcheck deliberately does less than ssh and says so
(docs/ssh.md lists them); never one where fleetcheck accepts what ssh refuses."""
