"""Query analysis and ranking for recall: words, periods, order, standing instructions."""
