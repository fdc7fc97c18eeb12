"""Real reaction types as reaction SMILES (reactants>>product), for rxnfp's real 50-label reaction
classifier (rxnfp==0.1.0's ``bert_ft_10k_25s``): one textbook example of each of 40 common classes,
written here (no reaction dataset is installed). ``rxnfp_words`` splits a SMILES with rxnfp's own
regular expression into the space-separated tokens its BERT reads (``rxnfp.tokenization``).
Used by tests/test_speed_int8.py (labels int8 changes) and scripts/bench_int8.py.
"""

from __future__ import annotations

import re

REACTIONS = [
    "CC(=O)O.OCC>>CCOC(C)=O",                                  # Fischer esterification
    "CC(=O)Cl.NCc1ccccc1>>CC(=O)NCc1ccccc1",                   # acylation of an amine
    "O=C(O)c1ccccc1.NC1CCCCC1>>O=C(NC1CCCCC1)c1ccccc1",        # amide coupling
    "CCOC(=O)c1ccc(N)cc1>>Nc1ccc(C(=O)O)cc1",                  # ester hydrolysis
    "OB(O)c1ccccc1.Brc1ccc(C)cc1>>Cc1ccc(-c2ccccc2)cc1",       # Suzuki coupling
    "Brc1ccccc1.C1COCCN1>>c1ccc(N2CCOCC2)cc1",                 # Buchwald-Hartwig amination
    "O=Cc1ccccc1.NCC>>CCNCc1ccccc1",                           # reductive amination
    "CC(C)(C)OC(=O)NC1CCNCC1>>NC1CCNCC1",                      # Boc deprotection
    "NC1CCCCC1.CC(C)(C)OC(=O)OC(=O)OC(C)(C)C>>CC(C)(C)OC(=O)NC1CCCCC1",  # Boc protection
    "O=[N+]([O-])c1ccc(Cl)cc1>>Nc1ccc(Cl)cc1",                 # nitro reduction
    "O=[N+]([O-])c1ccc(F)cc1.C1CCNCC1>>O=[N+]([O-])c1ccc(N2CCCCC2)cc1",  # SNAr
    "Oc1ccccc1.BrCc1ccccc1>>c1ccc(COc2ccccc2)cc1",             # Williamson ether synthesis
    "CC(=O)c1ccccc1>>CC(O)c1ccccc1",                           # ketone reduction
    "OCc1ccccc1>>O=Cc1ccccc1",                                 # alcohol oxidation
    "Cc1ccccc1S(=O)(=O)Cl.NCC>>CCNS(=O)(=O)c1ccccc1C",         # sulfonamide formation
    "O=C=Nc1ccccc1.NCC>>CCNC(=O)Nc1ccccc1",                    # urea formation
    "c1ccc2[nH]ccc2c1.CI>>Cn1ccc2ccccc21",                     # N-methylation
    "O=C(O)CCc1ccccc1>>OCCCc1ccccc1",                          # acid reduction
    "CC(C)=O.C[Mg]Br>>CC(C)(C)O",                              # Grignard addition
    "O=Cc1ccccc1.C(=P(c1ccccc1)(c1ccccc1)c1ccccc1)>>C=Cc1ccccc1",  # Wittig
    "c1ccc(cc1)O.CC(=O)OC(C)=O>>CC(=O)Oc1ccccc1",              # O-acetylation
    "Cc1ccccc1>>BrCc1ccccc1",                                  # benzylic bromination
    "c1ccc(cc1)B(O)O.Ic1ccncc1>>c1ccc(-c2ccncc2)cc1",          # Suzuki on a pyridine
    "C#Cc1ccccc1.Ic1ccccc1>>c1ccc(C#Cc2ccccc2)cc1",            # Sonogashira
    "CCOC(=O)CC(=O)OCC.BrCC>>CCOC(=O)C(CC)C(=O)OCC",           # malonate alkylation
    "OC1CCCCC1.O=C(O)c1ccccc1>>O=C(OC1CCCCC1)c1ccccc1",        # esterification (Mitsunobu-like)
    "CN.O=C(Cl)c1ccc([N+](=O)[O-])cc1>>CNC(=O)c1ccc([N+](=O)[O-])cc1",  # amide from acid chloride
    "COc1ccc(CC#N)cc1>>COc1ccc(CCN)cc1",                       # nitrile reduction
    "COc1ccccc1>>Oc1ccccc1",                                   # O-demethylation
    "Clc1ncccn1.NCc1ccccc1>>c1ccc(CNc2ncccn2)cc1",             # heteroaryl amination
    "CC(=O)OCC>>CC(=O)O",                                      # ester saponification
    "O=C1CCCCC1.NO>>ON=C1CCCCC1",                              # oxime formation
    "c1ccccc1.CC(=O)Cl>>CC(=O)c1ccccc1",                       # Friedel-Crafts acylation
    "Nc1ccccc1.O=C(Cl)OCc1ccccc1>>O=C(Nc1ccccc1)OCc1ccccc1",   # Cbz protection
    "O=C(OCc1ccccc1)NC1CCCC1>>NC1CCCC1",                       # Cbz deprotection
    "CC(C)(C)[Si](C)(C)Cl.OCc1ccccc1>>CC(C)(C)[Si](C)(C)OCc1ccccc1",  # TBS protection
    "CC(C)(C)[Si](C)(C)OCCc1ccccc1>>OCCc1ccccc1",              # TBS deprotection
    "O=C(O)c1ccccc1.CO>>COC(=O)c1ccccc1",                      # methyl ester formation
    "NC(=O)c1ccccc1>>N#Cc1ccccc1",                             # amide dehydration
    "Oc1ccc(Br)cc1.CI>>COc1ccc(Br)cc1",                        # O-methylation
]

# rxnfp.tokenization.SMI_REGEX_PATTERN, copied (importing rxnfp.tokenization needs rdkit, not installed):
# bracket atoms, two-letter halogens, ring-bond numbers
SMILES_REGEX = re.compile(
    r"(\%\([0-9]{3}\)|\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\||\(|\)|\.|=|#|-|\+|\\|\/|:|~|@|\?|>>?|\*|\$|\%[0-9]{2}|[0-9])"
)


def rxnfp_words(smiles: str) -> str:
    """``"CC(=O)O>>CC"`` → ``"C C ( = O ) O >> C C"``: the tokens rxnfp's tokenizer splits it into."""
    return " ".join(SMILES_REGEX.findall(smiles))
