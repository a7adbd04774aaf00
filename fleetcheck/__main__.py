from fleetcheck.cli import main

main()
