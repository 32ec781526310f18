"""Learning facts from turns: the model's answers checked, the extractive path."""
