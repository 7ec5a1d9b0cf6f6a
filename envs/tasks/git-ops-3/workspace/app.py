import os


def api_key():
    return os.environ["WEATHER_API_KEY"]


def forecast(city):
    return "forecast for %s (key %s...)" % (city, api_key()[:4])
