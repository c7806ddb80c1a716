"""Dutchie: GraphQL operations, request building, slug parsing, pagination rules, normalization."""
