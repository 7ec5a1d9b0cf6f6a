"""agenda: free-slot finder."""
