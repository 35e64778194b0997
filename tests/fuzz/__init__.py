"""The fuzz suite (issue 27); see conftest.py for its profiles."""
