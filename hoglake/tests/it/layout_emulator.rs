//! The table layout (HOGLAKE_PARTITION_BY, MILLPOND_SORT_BY) and type
//! promotions against the hoglake emulator and moto S3: declared once after
//! creation, recovered on a table left without one, fatal when it differs.

use crate::support;

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch};
use arrow::datatypes::{Float64Type, Int64Type};
use millpond_hoglake::layout::{parse_partition_by, Layout};
use millpond_hoglake::publish::{PublishError, INSERTED_AT};
use millpond_hoglake::schema::{ColumnDef, ColumnType, Table};

use support::*;

fn layout(partition_by: &str, sort_by: &[&str]) -> Layout {
    Layout {
        partition_by: if partition_by.is_empty() {
            vec![]
        } else {
            parse_partition_by(partition_by).unwrap()
        },
        sort_by: sort_by.iter().map(|s| s.to_string()).collect(),
    }
}

fn id_of(t: &Table, name: &str) -> i64 {
    t.columns.iter().find(|c| c.name == name).unwrap().field_id
}

fn layout_error(e: PublishError) -> String {
    match e {
        PublishError::Layout(m) => m,
        other => panic!("expected a layout divergence, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layout_is_declared_in_one_alter_after_creation_and_verified() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher_with(
        &emu,
        &s3,
        &bucket,
        layout("team,bucket(id, 4),day(_inserted_at)", &["team", "id"]),
    )
    .await;
    let t = p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    let spec = t.partition_spec.as_ref().expect("partition spec declared");
    let fields: Vec<(i64, &str, Option<i64>)> = spec
        .fields
        .iter()
        .map(|f| (f.source_field_id, f.transform.as_str(), f.transform_param))
        .collect();
    assert_eq!(
        fields,
        [
            (id_of(&t, "team"), "identity", None),
            (id_of(&t, "id"), "bucket", Some(4)),
            (id_of(&t, INSERTED_AT), "day", None)
        ]
    );
    let sort: Vec<(i64, &str, &str)> = t
        .sort_spec
        .as_ref()
        .expect("sort order declared")
        .fields
        .iter()
        .map(|f| {
            (
                f.source_field_id,
                f.direction.as_str(),
                f.null_order.as_str(),
            )
        })
        .collect();
    assert_eq!(
        sort,
        [
            (id_of(&t, "team"), "asc", "nulls_last"),
            (id_of(&t, "id"), "asc", "nulls_last")
        ]
    );
    let alters = emu.requests("/tables/events/alter$").await;
    assert_eq!(
        alters.len(),
        1,
        "partition spec and sort order in ONE alter"
    );
    let ops: Vec<&str> = alters[0]["body"]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["set_partition_spec", "set_sort_order"]);

    // A later resolve finds it matching and alters nothing.
    p.bootstrap(&batch(&[2], &[2]).schema()).await.unwrap();
    assert_eq!(emu.requests("/tables/events/alter$").await.len(), 1);

    // Files fan out under the declared spec: 2 teams x buckets, one commit.
    let receipt = p
        .publish("f1", &[batch(&[1, 2, 3, 4], &[7, 7, 8, 8])], &ranges(0, 3))
        .await
        .unwrap();
    assert_eq!(receipt.rows, 4);
    let commits = emu.commits().await;
    assert_eq!(commits.len(), 1);
    let files = commits[0]["body"]["appends"][0]["files"]
        .as_array()
        .unwrap();
    assert_eq!(files.len(), receipt.files);
    for f in files {
        let values = f["partition_values"].as_array().unwrap();
        assert_eq!(values.len(), 3, "{f}");
        assert!(values[0] == "7" || values[0] == "8", "{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_left_without_its_layout_gets_it_on_the_next_resolve() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    // Creation without the declaration (as if the pod died in between).
    let mut bare = publisher(&emu, &s3, &bucket).await;
    let t = bare.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    assert!(t.partition_spec.is_none());
    drop(bare);

    let mut p = publisher_with(&emu, &s3, &bucket, layout("team", &[])).await;
    let receipt = p
        .publish("f1", &[batch(&[1, 2, 3], &[5, 6, 5])], &ranges(0, 2))
        .await
        .unwrap();
    assert_eq!((receipt.rows, receipt.files), (3, 2));
    let live = p.catalog().get_table(NS, TABLE).await.unwrap().unwrap();
    assert_eq!(
        live.partition_spec.as_ref().unwrap().fields[0].source_field_id,
        id_of(&live, "team")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_divergent_layout_is_fatal_and_printed_in_the_config_grammar() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut first = publisher_with(&emu, &s3, &bucket, layout("team,bucket(id, 8)", &["id"])).await;
    first.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    let alters = emu.requests("/tables/events/alter$").await.len();

    let schema = batch(&[1], &[1]).schema();
    let mut changed =
        publisher_with(&emu, &s3, &bucket, layout("team,bucket(id, 16)", &["id"])).await;
    let err = layout_error(changed.bootstrap(&schema).await.unwrap_err());
    assert!(
        err.contains("partitioned by `team,bucket(id, 8)`")
            && err.contains("HOGLAKE_PARTITION_BY is `team,bucket(id, 16)`"),
        "{err}"
    );
    // It stays fatal: the same resolve fails the same way, and publishing
    // fails before anything is uploaded or committed.
    let again = layout_error(changed.bootstrap(&schema).await.unwrap_err());
    assert_eq!(again, err);
    let err = changed
        .publish("f", &[batch(&[1], &[1])], &ranges(0, 0))
        .await
        .unwrap_err();
    assert!(matches!(err, PublishError::Layout(_)), "{err:?}");
    assert!(emu.commits().await.is_empty());

    let mut unset = publisher(&emu, &s3, &bucket).await;
    let err = layout_error(unset.bootstrap(&schema).await.unwrap_err());
    assert!(
        err.contains("set HOGLAKE_PARTITION_BY=team,bucket(id, 8)"),
        "{err}"
    );

    let mut resorted =
        publisher_with(&emu, &s3, &bucket, layout("team,bucket(id, 8)", &["team"])).await;
    let err = layout_error(resorted.bootstrap(&schema).await.unwrap_err());
    assert!(
        err.contains("sort order `id`") && err.contains("MILLPOND_SORT_BY is `team`"),
        "{err}"
    );
    assert_eq!(
        emu.requests("/tables/events/alter$").await.len(),
        alters,
        "a divergence never alters the live table"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_column_missing_from_the_schema_is_fatal() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher_with(&emu, &s3, &bucket, layout("day(ts)", &["nope"])).await;
    let err = layout_error(p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap_err());
    assert!(
        err.contains("names ts") && err.contains("fix HOGLAKE_PARTITION_BY"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_int_and_float_columns_are_promoted_and_values_land_intact() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher(&emu, &s3, &bucket).await;
    let def = |name: &str, t: ColumnType| ColumnDef {
        name: name.into(),
        column_type: t,
        nullable: true,
        type_params: None,
        children: None,
        comment: None,
    };
    p.catalog().ensure_namespace(NS).await.unwrap();
    p.catalog()
        .create_table(
            NS,
            TABLE,
            &[
                def("id", ColumnType::Int),
                def("score", ColumnType::Float),
                def(INSERTED_AT, ColumnType::Timestamptz),
            ],
        )
        .await
        .unwrap();
    let big = i64::from(i32::MAX) + 1;
    let precise = 0.1f64; // not representable as f32
    let b = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(vec![1, big])) as ArrayRef),
        (
            "score",
            Arc::new(Float64Array::from(vec![precise, 2.5])) as ArrayRef,
        ),
    ])
    .unwrap();
    let receipt = p.publish("f1", &[b], &ranges(0, 1)).await.unwrap();
    assert_eq!(receipt.rows, 2);
    let live = p.catalog().get_table(NS, TABLE).await.unwrap().unwrap();
    let type_of = |n: &str| {
        live.columns
            .iter()
            .find(|c| c.name == n)
            .unwrap()
            .column_type
    };
    assert_eq!(type_of("id"), ColumnType::Long);
    assert_eq!(type_of("score"), ColumnType::Double);
    let alters = emu.requests("/tables/events/alter$").await;
    assert_eq!(alters.len(), 1, "both promotions in one alter");
    let back = read_back(&p, &receipt.paths[0]).await;
    assert_eq!(
        back.column_by_name("id")
            .unwrap()
            .as_primitive::<Int64Type>()
            .values()
            .as_ref(),
        &[1, big]
    );
    assert_eq!(
        back.column_by_name("score")
            .unwrap()
            .as_primitive::<Float64Type>()
            .values()
            .as_ref(),
        &[precise, 2.5]
    );
}
