package io.gpusched.slurm;

import io.gpusched.core.GpuException;

/** A {@code gres.conf} gpusched cannot read: the message names the line, the text and what would be valid. */
public final class GresConfException extends GpuException {
    private final int line;

    /** @param line 1-based line number; @param message what is wrong and what would be valid */
    public GresConfException(int line, String message) {
        super("gres.conf line " + line + ": " + message);
        this.line = line;
    }

    /** @return the 1-based line number */
    public int line() {
        return line;
    }
}
