"""Web entry points for the messaging channels; built in the service backbone issue."""
