"""AIStor Tables: warehouses of Iceberg tables this server keeps itself, their catalog users and policies."""
