package io.gpusched.cuda.fuzz;

import io.gpusched.cuda.internal.VersionFiles;

/**
 * Fuzz target for {@link VersionFiles#fromCudaHeader(String)}, the reader of an installation's include/cuda.h: a valid version,
 * empty, or IllegalArgumentException naming cuda.h and the expected form; nothing else.
 */
public final class CudaHeaderFuzzer {
    private CudaHeaderFuzzer() {
    }

    /** One input: the file's bytes. */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = CudaContract.text(input);
        CudaContract.version(s, "cuda.h", () -> VersionFiles.fromCudaHeader(s));
    }
}
