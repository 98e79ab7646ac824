"""What a run's power costs and earns: electricity tariffs and their exact bills, demand-
response events made concrete, and demand-response programs' settlement.
"""
