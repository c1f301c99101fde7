"""Small pieces every layer may use, importing nothing of the framework: fault points for tests,
where a class was defined (its spec and schemas beside it)."""
