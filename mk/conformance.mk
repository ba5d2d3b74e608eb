# Cross-language conformance (issue 7): the C99 reference codecs in native/ttext (the
# tt-ext header, the torch record and the tempotrace.stamps text), checked under AddressSanitizer/UBSan against
# every vector, fuzzed, and compared with the Python codecs through conformance/run
# (protocol: conformance/PROTOCOL.md).
#
#   conformance-c-build  warnings-as-errors build of libttext.a + adapter; C unit tests (header, record, stamps)
#   conformance-c-asan   the same sources under ASan+UBSan: unit tests, the FULL
#                        vector suite and 2,000 seeded mutations through the sanitized
#                        adapter, compared with Python (+ valgrind if present)
#   conformance-fuzz     seeded, bounded fuzz pass (vector-derived and random inputs)
#                        through the sanitized codec and request parser
#   conformance-run      every vector, then 20,000 seeded mutations of their inputs, through
#                        the Python AND C adapters; any failure or disagreement fails the build

TEST_STEPS += conformance-c-build conformance-c-asan conformance-fuzz conformance-run

TTEXT_CC ?= gcc
TTEXT_DIR := native/ttext
TTEXT_OUT := native/build/ttext
TTEXT_LIB_SRC := $(TTEXT_DIR)/ttext.c $(TTEXT_DIR)/murmur3.c $(TTEXT_DIR)/record.c $(TTEXT_DIR)/stamps.c
TTEXT_ADAPTER_SRC := $(TTEXT_DIR)/adapter.c $(TTEXT_DIR)/adapter_stamps.c $(TTEXT_DIR)/jsonline.c $(TTEXT_LIB_SRC)
TTEXT_HDRS := $(wildcard $(TTEXT_DIR)/*.h)
TTEXT_CFLAGS := -std=c99 -O2 -Wall -Wextra -Werror -pedantic
# -fno-sanitize-recover: a UBSan finding aborts (non-zero exit) instead of printing and going on.
TTEXT_ASAN_CFLAGS := -std=c99 -O1 -g -Wall -Wextra -Werror -pedantic \
	-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
TTEXT_SAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Fixed seeds and counts: the same inputs every run, a few seconds each.
TTEXT_FUZZ_SEED ?= 20261129
TTEXT_FUZZ_ITERATIONS ?= 500000
# Shared in turn by binary headers, text headers, records and stamps texts: 7,500 of each.
TTEXT_DIFFERENTIAL ?= 30000

.PHONY: conformance-cc-check

# A fresh machine (CI runs as root) may lack the compiler: install it rather than fail obscurely.
conformance-cc-check:
	@command -v $(TTEXT_CC) >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "conformance: installing gcc for the C reference codec"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev; \
	  else echo "conformance: $(TTEXT_CC) not found; install gcc (with libasan/libubsan)" >&2; exit 1; fi; }

$(TTEXT_OUT)/%.o: $(TTEXT_DIR)/%.c $(TTEXT_HDRS) | conformance-cc-check
	@mkdir -p $(@D)
	$(TTEXT_CC) $(TTEXT_CFLAGS) -c -o $@ $<

$(TTEXT_OUT)/libttext.a: $(TTEXT_OUT)/ttext.o $(TTEXT_OUT)/murmur3.o $(TTEXT_OUT)/record.o $(TTEXT_OUT)/stamps.o
	ar rcs $@ $^

$(TTEXT_OUT)/ttext-adapter: $(TTEXT_ADAPTER_SRC) $(TTEXT_HDRS) | conformance-cc-check
	@mkdir -p $(@D)
	$(TTEXT_CC) $(TTEXT_CFLAGS) -o $@ $(TTEXT_ADAPTER_SRC)

$(TTEXT_OUT)/test_ttext: $(TTEXT_DIR)/test_ttext.c $(TTEXT_LIB_SRC) $(TTEXT_HDRS) | conformance-cc-check
	@mkdir -p $(@D)
	$(TTEXT_CC) $(TTEXT_CFLAGS) -o $@ $(TTEXT_DIR)/test_ttext.c $(TTEXT_LIB_SRC)

$(TTEXT_OUT)/test_record: $(TTEXT_DIR)/test_record.c $(TTEXT_LIB_SRC) $(TTEXT_HDRS) | conformance-cc-check
	@mkdir -p $(@D)
	$(TTEXT_CC) $(TTEXT_CFLAGS) -o $@ $(TTEXT_DIR)/test_record.c $(TTEXT_LIB_SRC)

$(TTEXT_OUT)/test_stamps: $(TTEXT_DIR)/test_stamps.c $(TTEXT_LIB_SRC) $(TTEXT_HDRS) | conformance-cc-check
	@mkdir -p $(@D)
	$(TTEXT_CC) $(TTEXT_CFLAGS) -o $@ $(TTEXT_DIR)/test_stamps.c $(TTEXT_LIB_SRC)

$(TTEXT_OUT)/test_stamps-asan: $(TTEXT_DIR)/test_stamps.c $(TTEXT_LIB_SRC) $(TTEXT_HDRS) | conformance-cc-check
	@mkdir -p $(@D)
	$(TTEXT_CC) $(TTEXT_ASAN_CFLAGS) -o $@ $(TTEXT_DIR)/test_stamps.c $(TTEXT_LIB_SRC)

$(TTEXT_OUT)/test_record-asan: $(TTEXT_DIR)/test_record.c $(TTEXT_LIB_SRC) $(TTEXT_HDRS) | conformance-cc-check
	@mkdir -p $(@D)
	$(TTEXT_CC) $(TTEXT_ASAN_CFLAGS) -o $@ $(TTEXT_DIR)/test_record.c $(TTEXT_LIB_SRC)

$(TTEXT_OUT)/ttext-adapter-asan: $(TTEXT_ADAPTER_SRC) $(TTEXT_HDRS) | conformance-cc-check
	@mkdir -p $(@D)
	$(TTEXT_CC) $(TTEXT_ASAN_CFLAGS) -o $@ $(TTEXT_ADAPTER_SRC)

$(TTEXT_OUT)/test_ttext-asan: $(TTEXT_DIR)/test_ttext.c $(TTEXT_LIB_SRC) $(TTEXT_HDRS) | conformance-cc-check
	@mkdir -p $(@D)
	$(TTEXT_CC) $(TTEXT_ASAN_CFLAGS) -o $@ $(TTEXT_DIR)/test_ttext.c $(TTEXT_LIB_SRC)

TTEXT_FUZZ_SRC := $(TTEXT_DIR)/fuzz.c $(TTEXT_DIR)/fuzz_record.c $(TTEXT_DIR)/fuzz_stamps.c $(TTEXT_DIR)/jsonline.c
$(TTEXT_OUT)/fuzz-asan: $(TTEXT_FUZZ_SRC) $(TTEXT_LIB_SRC) $(TTEXT_HDRS) | conformance-cc-check
	@mkdir -p $(@D)
	$(TTEXT_CC) $(TTEXT_ASAN_CFLAGS) -o $@ $(TTEXT_FUZZ_SRC) $(TTEXT_LIB_SRC)

conformance-c-build: $(TTEXT_OUT)/libttext.a $(TTEXT_OUT)/ttext-adapter $(TTEXT_OUT)/test_ttext $(TTEXT_OUT)/test_record \
		$(TTEXT_OUT)/test_stamps
	$(TTEXT_OUT)/test_ttext
	$(TTEXT_OUT)/test_record
	$(TTEXT_OUT)/test_stamps

conformance-c-asan: venv $(TTEXT_OUT)/ttext-adapter-asan $(TTEXT_OUT)/test_ttext-asan $(TTEXT_OUT)/test_record-asan \
		$(TTEXT_OUT)/test_stamps-asan
	$(TTEXT_SAN_ENV) $(TTEXT_OUT)/test_ttext-asan
	$(TTEXT_SAN_ENV) $(TTEXT_OUT)/test_record-asan
	$(TTEXT_SAN_ENV) $(TTEXT_OUT)/test_stamps-asan
	$(TTEXT_SAN_ENV) PYTHON=$(PY) conformance/run --impl python --impl c-asan=$(TTEXT_OUT)/ttext-adapter-asan \
	  --differential 3000 --seed $(TTEXT_FUZZ_SEED)
	@if command -v valgrind >/dev/null 2>&1; then \
	  PYTHON=$(PY) conformance/run --timeout 60 \
	    --impl "c-valgrind=valgrind -q --error-exitcode=99 --leak-check=full $(TTEXT_OUT)/ttext-adapter"; \
	else echo "conformance: valgrind not installed; the ASan/UBSan run above covers memory errors"; fi

conformance-fuzz: venv $(TTEXT_OUT)/fuzz-asan
	PYTHON=$(PY) conformance/run --write-corpus $(TTEXT_OUT)/fuzz-corpus.txt
	$(TTEXT_SAN_ENV) $(TTEXT_OUT)/fuzz-asan -n $(TTEXT_FUZZ_ITERATIONS) -s $(TTEXT_FUZZ_SEED) $(TTEXT_OUT)/fuzz-corpus.txt

conformance-run: venv $(TTEXT_OUT)/ttext-adapter
	PYTHON=$(PY) conformance/run --all --c-adapter $(TTEXT_OUT)/ttext-adapter \
	  --differential $(TTEXT_DIFFERENTIAL) --seed $(TTEXT_FUZZ_SEED)
