"""The daily memory sweep's pure core: windows, packets, authority, trigger conditions.

No I/O and no clock here: ``now`` always comes in as a value.
"""
