import os
import unittest


def listing(path):
    return sorted(os.listdir(path))


class TestMonthlyFolders(unittest.TestCase):
    def test_top_level(self):
        self.assertEqual(listing("camera"), ["2023-07", "2023-08", "2023-09", "README.txt"])

    def test_july(self):
        self.assertEqual(listing("camera/2023-07"),
                         ["IMG_2023-07-14_1203.jpg", "IMG_2023-07-29_0810.jpg", "VID_20230716_1100.mp4"])

    def test_august(self):
        self.assertEqual(listing("camera/2023-08"),
                         ["IMG_2023-08-02_1745.jpg", "Screenshot 2023-08-15 at 10.02.11.png", "VID_20230802_0915.mp4"])

    def test_september(self):
        self.assertEqual(listing("camera/2023-09"),
                         ["IMG_2023-09-30_0600.jpg", "Screenshot 2023-09-01 at 22.40.05.png", "VID_20230911_2230.mp4"])

    def test_contents_kept(self):
        for rel in ["2023-07/VID_20230716_1100.mp4", "2023-09/Screenshot 2023-09-01 at 22.40.05.png",
                    "2023-08/IMG_2023-08-02_1745.jpg"]:
            with open(os.path.join("camera", rel)) as f:
                self.assertEqual(f.read(), "media bytes of %s\n" % os.path.basename(rel))
        with open("camera/README.txt") as f:
            self.assertEqual(f.read(), "Phone camera dump. Sort into monthly folders before uploading.\n")


if __name__ == "__main__":
    unittest.main()
