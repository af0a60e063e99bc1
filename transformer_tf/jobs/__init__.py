"""End-to-end jobs: the translation main job, the parsing job, the Table 3 study."""
