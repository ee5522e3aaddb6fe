//! The Helm chart (deploy/helm/millpond), rendered and linted by real Helm
//! (helm-python-sdk) and validated against the Kubernetes schemas; each check
//! on the render is also run against a broken render and must fail there.
#[test]
fn helm_chart_renders_and_validates() {
    millpond_tests::python_check("check_helm_chart.py", "helm chart check");
}
