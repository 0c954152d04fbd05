"""TPL1xx: host/device traffic and synchronisation."""
