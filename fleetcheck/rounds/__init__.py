"""Living across patrols: the patrol loop, state, history, alerting."""
