"""``tether demo`` as a use case: a live session with the embedded model that compacts,
beats and recalls, every step checked (``demo.steps``); the command only draws it."""
