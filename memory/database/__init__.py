"""The database: engines, migrations, tables, shared statements, each dialect's SQL."""
