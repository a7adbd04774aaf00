"""A differential harness for host keys: the real OpenSSH client (`ssh -o BatchMode=yes`)
and fleetcheck's transport, each against the same real sshd in a lab namespace with the same
known_hosts file, case by case (corpus.py). Every case must agree, or be a refusal that
docs/ssh.md documents (fleetcheck is stricter: no TOFU); never may fleetcheck connect where
OpenSSH refuses. `python -m tests.ssh_diff_hostkeys.summary` prints the docs' summary."""
