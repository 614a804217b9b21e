package eventlake.transforms;

import java.time.Instant;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.api.java.UDF0;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * The time a row is processed: the clock of the task that computes it.
 *
 * <p>Spark turns {@code current_timestamp()} into the batch's start time, written into the
 * generated code as a constant, so a flow using it compiles its code anew at every
 * micro-batch. This is a call the code makes for each row; the code stays the same.
 *
 * <p>Compiled by Janino (eventlake/jvm_code.py): raw types, no lambdas.
 */
public final class ProcessingTime implements UDF0 {
    public Object call() {
        return Instant.now();
    }

    /** A TIMESTAMP column of each row's processing time, never null (as current_timestamp). */
    public static Column column() {
        return functions.udf(new ProcessingTime(), DataTypes.TimestampType)
            .asNondeterministic()
            .asNonNullable()
            .apply(new Column[0]);
    }
}
