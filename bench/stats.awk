# Helpers for the bench/ scripts' summaries: a list is a string of
# numbers separated by spaces.

# sorted splits list into a, sorted ascending, and returns its length.
function sorted(list, a,   n, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
	return n
}

# median is the list's median.
function median(list,   n, a) {
	n = sorted(list, a)
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}

# range is "min-max" of the list, each printed with fmt (e.g. "%.3f").
function range(list, fmt,   n, a) {
	n = sorted(list, a)
	return sprintf(fmt "-" fmt, a[1], a[n])
}
