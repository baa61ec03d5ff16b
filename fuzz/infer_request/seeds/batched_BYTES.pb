
batch1seed*
sBYTES*BaBb