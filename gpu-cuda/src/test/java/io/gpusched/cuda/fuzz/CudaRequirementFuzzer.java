package io.gpusched.cuda.fuzz;

import io.gpusched.cuda.CudaRequirement;
import io.gpusched.cuda.CudaVersion;
import io.gpusched.cuda.DriverVersion;

/**
 * Fuzz target for {@link CudaRequirement#parse(String)}, {@link CudaVersion#parse(String)} and
 * {@link DriverVersion#parse(String)}: only IllegalArgumentException naming the input and the expected form. A parsed
 * requirement accepts the version it names; a parsed version and driver print back to what they parse from.
 */
public final class CudaRequirementFuzzer {
    private CudaRequirementFuzzer() {
    }

    /** One input: the text. */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = CudaContract.text(input);
        try {
            CudaRequirement r = CudaRequirement.parse(s);
            CudaVersion named = r.minimum().or(r::exact).orElseThrow();
            if (!r.accepts(named)) {
                throw new AssertionError(r + " does not accept " + named + ", for " + CudaContract.show(s));
            }
        } catch (IllegalArgumentException e) {
            named(e, s);
        }
        try {
            CudaVersion v = CudaVersion.parse(s);
            if (!CudaVersion.parse(v.toString()).equals(v)) {
                throw new AssertionError(v + " does not parse back, for " + CudaContract.show(s));
            }
        } catch (IllegalArgumentException e) {
            named(e, s);
        }
        try {
            DriverVersion d = DriverVersion.parse(s);
            if (d.compareTo(DriverVersion.parse(d.toString())) != 0) {
                throw new AssertionError(d + " does not parse back, for " + CudaContract.show(s));
            }
            d.branch();
        } catch (IllegalArgumentException e) {
            named(e, s);
        }
    }

    private static void named(IllegalArgumentException e, String s) {
        if (e.getClass() != IllegalArgumentException.class) {
            throw new AssertionError("threw " + e.getClass().getName() + " for " + CudaContract.show(s), e);
        }
        String m = e.getMessage();
        if (m == null || !(m.contains("\"" + s + "\"") || m.contains("\"" + s.trim() + "\""))
                || !(m.contains("expected") || m.contains("e.g."))) {
            throw new AssertionError("message " + m + " does not name the input and the expected form, for "
                    + CudaContract.show(s), e);
        }
    }
}
