"""Schedules: the ways of dividing a tile op's elements among threads that variants share."""
