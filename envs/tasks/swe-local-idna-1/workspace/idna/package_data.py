__version__ = '3.7'

