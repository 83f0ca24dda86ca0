"""Stand-ins for the tests, the bench and the soak: never imported by the product itself."""
