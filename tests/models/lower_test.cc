// lower tests
