import os
import unittest


def read(path):
    with open(path) as f:
        return f.read()


class TestFlattened(unittest.TestCase):
    def test_top_level_names(self):
        self.assertEqual(sorted(os.listdir("samples")), [
            "README.md",
            "click.wav",
            "fx-riser_long.wav",
            "kick_drums-deep_kick.wav",
            "kick_drums-punchy.wav",
            "old-rim_shot.wav",
            "snares",
            "snares-snare_tight_01.wav",
        ])

    def test_empty_folders_removed(self):
        self.assertFalse(os.path.exists("samples/Kick Drums"))
        self.assertFalse(os.path.exists("samples/FX"))

    def test_non_wav_kept_in_place(self):
        self.assertEqual(sorted(os.listdir("samples/snares")), ["old"])
        self.assertEqual(sorted(os.listdir("samples/snares/old")), ["notes.txt"])
        self.assertEqual(read("samples/snares/old/notes.txt"), "rim shot recorded 2019, keep for reference\n")

    def test_contents_kept(self):
        self.assertEqual(read("samples/kick_drums-deep_kick.wav"), "RIFF deep kick\n")
        self.assertEqual(read("samples/old-rim_shot.wav"), "RIFF rim shot\n")
        self.assertEqual(read("samples/snares-snare_tight_01.wav"), "RIFF tight snare\n")
        self.assertEqual(read("samples/click.wav"), "RIFF click\n")
        self.assertEqual(read("samples/README.md"), "# Sample pack\nOne-shots for the beat project.\n")


if __name__ == "__main__":
    unittest.main()
