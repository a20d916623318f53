"""Example trial programs: real, small objectives a sweep can run as jobs."""
