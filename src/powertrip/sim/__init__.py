"""The simulator: real federated training over emulated sites in simulated time (DESIGN §1)."""
