package io.gpusched.accounting;

/** A line of the accounting store that is not a valid record: the message says which field and what is valid. */
public final class AccountingFormatException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    /** @param message what is wrong, naming the field */
    public AccountingFormatException(String message) {
        super(message);
    }
}
