import os
import unittest


def files_in(path):
    return sorted(n for n in os.listdir(path) if os.path.isfile(os.path.join(path, n)))


def read(path):
    with open(path) as f:
        return f.read()


class TestSorted(unittest.TestCase):
    def test_images(self):
        self.assertTrue(os.path.isdir("downloads/images"))
        self.assertEqual(files_in("downloads/images"), ["beach.jpg", "cat.png", "sunset.jpg"])

    def test_documents(self):
        self.assertTrue(os.path.isdir("downloads/documents"))
        self.assertEqual(files_in("downloads/documents"), ["invoice-march.pdf", "manual.pdf", "todo.txt"])

    def test_others_stay(self):
        self.assertEqual(files_in("downloads"), ["setup.zip", "song.mp3"])
        self.assertEqual(sorted(os.listdir("downloads")), ["documents", "images", "setup.zip", "song.mp3"])

    def test_contents_kept(self):
        self.assertEqual(read("downloads/images/cat.png"), "PNG-DATA cat sleeping\n")
        self.assertEqual(read("downloads/documents/todo.txt"), "buy milk\ncall the plumber\n")
        self.assertEqual(read("downloads/setup.zip"), "PK zip archive setup\n")
        self.assertEqual(read("downloads/images/sunset.jpg"), "JPEG-DATA sunset over the bay\n")


if __name__ == "__main__":
    unittest.main()
