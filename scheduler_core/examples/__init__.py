"""Small programs that keep the job contract, for the README's first job and the end-to-end tests."""
