"""Adapters to the outside world: the broker (redis-py) and hosts (SSH, or this machine)."""
