"""kvconf: tiny key = value config reader."""
from .parser import parse_config
