"""``tether doctor``: is the configured inference backend usable, and with what context;
is anything damaged. ``checks.examine`` runs every check and returns one ``Report``."""
