"""`fleetcheck serve`: the read-only web console and its pages (html, svg)."""
