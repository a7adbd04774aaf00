"""The plugin contract and its runner: model, check, registry, context, judge, runner."""
