"""What model calls cost: prices, budgets and the usage table."""
