// cli tests
