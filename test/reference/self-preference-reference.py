# The reference figures of self-preference with the tutor as the unit (test/analysis.test.ts) on
# self-preference-sets.json: tutors of the judge's family and of others, of equal and unequal
# sizes, one or two scorers a transcript, x scored 0..3 (tutor_interval.py has the method):
#   /usr/bin/python3 test/reference/self-preference-reference.py
import json, os, sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tutor_interval import self_preference

HERE = os.path.dirname(os.path.abspath(__file__))
out = []
for data in json.load(open(os.path.join(HERE, "self-preference-sets.json")))["sets"]:
    people = {}
    for tutor, task, scorer, score in data["humans"]:
        people.setdefault((tutor, task), []).append(score)
    units = [(tutor, data["tutor_families"][tutor] == data["judge_family"], score - float(np.mean(people[(tutor, task)])))
             for tutor, task, score in data["judge"]]
    out.append(self_preference(units))
print(json.dumps(out, indent=1))
