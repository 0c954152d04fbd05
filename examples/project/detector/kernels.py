def pick(x, order):
    picked = x[:, order]
    print(picked.max())
    return picked
