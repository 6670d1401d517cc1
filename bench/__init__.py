"""codemode's benchmark suites, installed with the package and run by ``codemode bench``."""
