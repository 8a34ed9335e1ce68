"""The outer layer: the web app (webhooks.app), the channel adapters (one subpackage each), the
`pam` command line and the composition root that wires the real parts (webhooks.wiring)."""
