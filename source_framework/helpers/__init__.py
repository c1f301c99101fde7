"""Small pieces every layer may use, importing nothing of the framework."""
